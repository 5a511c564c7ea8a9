"""dtn-migrate: move VM images between OpenStack clouds through DTNs."""
