"""Values cut with an ellipsis, and the stylesheet that cuts them."""

from django.contrib.staticfiles import finders
import sass

from dtn_migrate.dashboard import cells
from dtn_migrate.dashboard.enabled import \
    _1800_dtn_migrate_project_panel_group as panel_group
from tests.unit.dashboard import base


class EllipsisTest(base.TestCase):

    def test_span_with_the_whole_value_in_its_title(self):
        self.assertEqual(
            '<span class="dtn-ellipsis" title="cloud-b">cloud-b</span>',
            cells.ellipsis("cloud-b"))
        self.assertEqual("-", cells.ellipsis(None))
        self.assertIsNone(cells.ellipsis("", empty=None))

    def test_shortened_once(self):
        html = cells.ellipsis("e" * 500, limit=64, css="dtn-reason")
        self.assertIn('class="dtn-ellipsis dtn-reason"', html)
        self.assertIn(">%s…(500 characters)<" % ("e" * 64), html)
        self.assertEqual(1, html.count("e" * 500))

    def test_escaped(self):
        html = cells.ellipsis('<b title="x">')
        self.assertNotIn("<b", html)
        self.assertIn("&lt;b title=&quot;x&quot;&gt;", html)

    def test_the_stylesheet_cuts_them(self):
        [path] = panel_group.ADD_SCSS_FILES
        found = finders.find(path)
        self.assertIsNotNone(found, path)
        with open(found, encoding="utf-8") as f:
            css = sass.compile(string=f.read())
        self.assertIn(".%s {" % cells.ELLIPSIS, css)
        self.assertIn("text-overflow: ellipsis", css)
        self.assertIn("select.dtn-image-list", css)
