"""Feature plug-ins the tests load with --feature_module."""
