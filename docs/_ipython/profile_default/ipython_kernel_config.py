# The IPython profile of the kernels that execute the tutorials for the documentation site (docs/conf.py
# points IPYTHONDIR here). Figures are stored at twice their pixels and displayed at their size, so that
# they stay sharp when a browser scales them to the page.
c = get_config()  # noqa: F821
c.InlineBackend.figure_formats = {"retina"}
