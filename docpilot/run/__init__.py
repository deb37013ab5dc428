"""One eval run: the job, the stages and their order, the orchestrator choice, the model lane, the cache, progress and the remote client."""
