"""Training the signal detector: synthetic errors, features, the classifier artifact."""
