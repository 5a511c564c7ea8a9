"""URLs of the admin migrations panel."""

from django.urls import re_path

from dtn_migrate.dashboard.content.admin_migrations import views

urlpatterns = [
    re_path(r"^$", views.IndexView.as_view(), name="index"),
    re_path(r"^(?P<migration_id>[^/]+)/$", views.DetailView.as_view(),
            name="detail"),
]
