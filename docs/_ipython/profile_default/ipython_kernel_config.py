# The IPython profile of the kernels that execute the tutorials for the documentation site (docs/conf.py
# points IPYTHONDIR here). Figures are stored at twice their pixels and displayed at their size, so that
# they stay sharp when a browser scales them to the page.
c = get_config()  # noqa: F821
c.InlineBackend.figure_formats = {"retina"}
# A wide multi-panel figure is scaled down to the page's text column; a larger base font keeps its
# labels readable there (about 10 px on a 1280 px wide window instead of 7).
c.InlineBackend.rc = {"font.size": 12}
