"""URLs of the admin protection policies panel."""

from django.urls import re_path

from dtn_migrate.dashboard.content.admin_policies import views

urlpatterns = [
    re_path(r"^$", views.IndexView.as_view(), name="index"),
    re_path(r"^(?P<policy_id>[^/]+)/$", views.DetailView.as_view(),
            name="detail"),
]
