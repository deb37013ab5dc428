"""One eval run: the job, the stages over shards, the model lane, the stage cache, progress and the remote client."""
