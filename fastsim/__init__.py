"""fastsim: fast, exact simulation of how GPU platforms schedule and stop LLM fine-tuning jobs."""
__version__ = "0.1.0"
