"""URLs of the admin peers panel."""

from django.urls import re_path

from dtn_migrate.dashboard.content.admin_peers import views

urlpatterns = [
    re_path(r"^$", views.IndexView.as_view(), name="index"),
]
