"""HTML of table cells and detail values that must not wrap: a long
value cut with an ellipsis, the whole of it in the ``title`` attribute.

The CSS class :data:`ELLIPSIS` (``static/dtn_migrate/scss/dtn_migrate.scss``)
keeps the value on one line and cuts it at the cell's width; a value
longer than a message should quote is shortened first with
:func:`dtn_migrate.common.text.shorten`, so that the page does not
carry it twice in full.
"""

from django.utils import html
from horizon import tables

from dtn_migrate.common import text

#: The class of a value cut with an ellipsis (see the module's doc).
ELLIPSIS = "dtn-ellipsis"


def ellipsis(value, limit=None, empty="-", css=None):
    """``<span class="dtn-ellipsis" title="VALUE">VALUE</span>``, the
    shown text shortened to ``limit`` characters when one is given, the
    span of class ``css`` too when given; ``empty`` for a value that is
    None or blank.
    """
    if value is None or str(value) == "":
        return empty
    value = str(value)
    shown = text.shorten(value, limit) if limit else value
    classes = ELLIPSIS + (" " + css if css else "")
    return html.format_html('<span class="{}" title="{}">{}</span>',
                            classes, value, shown)


def _title(data):
    return {"title": str(data)} if data not in (None, "") else {}


class EllipsisColumn(tables.Column):
    """A column whose values stay on one line, cut with an ellipsis,
    the whole of each in its ``title``: for a linked column the link
    is cut and the cell has the title (Horizon escapes a link's text);
    otherwise the value is an :func:`ellipsis` span (of ``limit`` and
    ``css``).
    """

    def __init__(self, transform, limit=None, css=None, **kwargs):
        if kwargs.get("link"):
            kwargs.setdefault("link_attrs", {"class": ELLIPSIS})
            kwargs.setdefault("cell_attributes_getter", _title)
        self.limit = limit
        self.css = css
        super().__init__(transform, **kwargs)

    def get_data(self, datum):
        data = super().get_data(datum)
        if self.link:
            return data
        return ellipsis(data, limit=self.limit, empty=None, css=self.css)
