"""One eval run: the job, the stages and their order, the orchestrator choice, the model lane and the remote eval."""
