"""Wide&Deep as the models repository writes it: model, callbacks, metric, data, config."""
