"""Prefect flows: the eval flow, its executors on Prefect and Dask, the planner, the schedules."""
