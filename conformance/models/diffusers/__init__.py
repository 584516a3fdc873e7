"""The Diffusers zoo: every Diffusers model class, tiny, on the models suite (`models --library diffusers`)."""
