"""oslo.i18n integration."""

import oslo_i18n

DOMAIN = 'dtn_migrate'

_translators = oslo_i18n.TranslatorFactory(domain=DOMAIN)

# The primary translation function using the well-known name "_"
_ = _translators.primary
