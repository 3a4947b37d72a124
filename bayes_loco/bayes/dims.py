"""Dimension and variable names of the Bayesian road, in one place.

Every PyMC variable and every DataTree variable of :mod:`bayes_loco.bayes`
declares its dims with these names, so ArviZ selections (``sel``,
``var_names``) and ``pm.set_data`` calls never depend on spelling.
"""

from __future__ import annotations

#: Rows of the comparison data (t = 1 … N).
COMPARISON = "comparison"
#: Context coordinates x (d_x of them): rows of Θ and of U.
CONTEXT = "context"
#: Feature coordinates φ (d_φ of them): columns of Θ and rows of V.
FEATURE = "feature"
#: Latent rank r: columns of U and V.
RANK = "rank"
#: Reduced (RTV) coordinates θ_rtv, k = (d_x + d_φ) r − r² of them.
RTV_COORD = "rtv_coord"

#: Names of the model's data containers (``pm.set_data`` keys).
DATA_CONTEXTS = "contexts"
DATA_DIFFERENCES = "differences"
DATA_LABELS = "labels"

#: Names of the model's variables.
LEFT = "U"
RIGHT = "V"
THETA = "theta"
THETA_RTV = "theta_rtv"
MARGINS = "eta"
OBSERVED = "y"
LEFT_SCALE = "sigma_U"
RIGHT_SCALE = "sigma_V"
BALANCE = "balance"

#: The quantities that are identified by the likelihood and are diagnosed
#: (R-hat, ESS); U and V are not (rotations U R, V R give the same Θ).
IDENTIFIED = (THETA, THETA_RTV)
