"""Small helpers the services, the runbook CLI and the development
clouds share.
"""

from dtn_migrate.common import polling

#: The poll loop (:func:`dtn_migrate.common.polling.poll`), under the
#: name the local clouds (``devcloud``) and the tests call.
wait_for = polling.poll
