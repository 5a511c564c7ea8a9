"""URLs of the project's migrations panel."""

from django.urls import re_path

from dtn_migrate.dashboard.content.migrations import views

urlpatterns = [
    re_path(r"^$", views.IndexView.as_view(), name="index"),
    re_path(r"^migrate/$", views.MigrateView.as_view(), name="migrate"),
    re_path(r"^(?P<migration_id>[^/]+)/$", views.DetailView.as_view(),
            name="detail"),
]
