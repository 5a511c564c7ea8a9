"""The OpenAPI document: up to date with the schemas it is built from,
a valid OpenAPI 3.0 document, the router's routes exactly, and the
application's answers conform to it (schemathesis, in process).
"""

import jsonschema
import yaml

from dtn_migrate.api import openapi
from dtn_migrate.api import router
from tests.unit.api import base

MAX_EXAMPLES = 15


def _document():
    with open(openapi.PATH) as f:
        return yaml.safe_load(f)


class TestDocument(base.ApiTestCase):

    def test_file_is_generated_from_the_schemas(self):
        self.assertEqual(openapi.build(), _document(),
                         'run: python -m dtn_migrate.api.openapi')

    def test_valid_openapi_30(self):
        from schemathesis.specs.openapi import definitions
        validator = jsonschema.Draft4Validator(definitions.OPENAPI_30)
        errors = [(list(e.absolute_path), e.message)
                  for e in validator.iter_errors(_document())]
        self.assertEqual([], errors)

    def test_routes_match_the_router(self):
        documented = {(path, method.upper())
                      for path, item in _document()['paths'].items()
                      for method in item if method != 'parameters'}
        routed = {(path, method) for path, methods in router.ROUTES
                  for method in methods}
        self.assertEqual(routed, documented)

    def test_every_operation_documents_its_errors(self):
        for path, item in _document()['paths'].items():
            for method, op in item.items():
                if method == 'parameters':
                    continue
                codes = set(op['responses'])
                if path != '/':
                    self.assertIn('401', codes, (method, path))
                if method == 'post':
                    self.assertTrue({'400', '413', '415'} <= codes,
                                    (method, path))

    def test_nullable_conversion(self):
        self.assertEqual({'type': 'string', 'nullable': True},
                         openapi.to_openapi({'type': ['string', 'null']}))
        self.assertEqual({'nullable': True, 'enum': [None]},
                         openapi.to_openapi({'type': 'null'}))
        self.assertRaises(ValueError, openapi.to_openapi,
                          {'type': ['string', 'integer']})


class TestConformance(base.ApiTestCase):
    """schemathesis against the application in process: no 5xx, and
    every answer matches the document.
    """

    def test_schemathesis(self):
        import hypothesis
        import schemathesis
        from schemathesis import checks

        # Records to list and act on, in the member's project.
        for state in ('running', 'failed', 'complete'):
            self.add(state=state, progress=0.5, bytes_export=10)
        policy = self.add_policy()
        self.db.policy_image_upsert(policy['id'], base.IMAGE,
                                    {'state': 'replicated', 'size': 5})
        self.db.replica_upsert('outgoing', 'b', base.IMAGE,
                               {'project_id': base.PROJECT,
                                'policy_id': policy['id']})
        self.add_drill(policy_id=policy['id'])
        schema = schemathesis.openapi.from_dict(_document())
        headers = self.headers('member')
        failures = []
        operations = 0
        for result in schema.get_all_operations():
            operation = result.ok()
            operations += 1

            @hypothesis.settings(
                max_examples=MAX_EXAMPLES, deadline=None, database=None,
                derandomize=True,
                suppress_health_check=list(hypothesis.HealthCheck),
                phases=[hypothesis.Phase.explicit,
                        hypothesis.Phase.generate])
            @hypothesis.given(case=operation.as_strategy())
            def run(case):
                case.call_and_validate(
                    app=self.app, headers=headers,
                    checks=[checks.not_a_server_error,
                            checks.status_code_conformance,
                            checks.content_type_conformance,
                            checks.response_schema_conformance])

            try:
                run()
            except Exception as exc:  # noqa: B902 - collected, then failed
                failures.append('%s %s: %s' % (
                    operation.method.upper(), operation.path, exc))
        self.assertEqual(20, operations)
        self.assertEqual([], failures)
