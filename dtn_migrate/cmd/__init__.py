"""Console entry points."""

import warnings

# oslo.service's threading backend is used; eventlet is only installed as
# a transitive dependency and warns when imported.
warnings.filterwarnings("ignore", message="(?s).*eventlet")
