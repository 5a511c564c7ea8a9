"""URLs of the peers panel."""

from django.urls import re_path

from dtn_migrate.dashboard.content.peers import views

urlpatterns = [
    re_path(r"^$", views.IndexView.as_view(), name="index"),
]
