"""The admin peers page (the same health view as the project's)."""

from dtn_migrate.dashboard.content.peers import views


class IndexView(views.IndexView):
    pass
