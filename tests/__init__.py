import warnings

# eventlet is installed as a transitive dependency only (the services use
# oslo.service's threading backend) and warns when something imports it.
warnings.filterwarnings("ignore", message="(?s).*eventlet")
