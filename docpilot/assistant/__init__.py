"""The assistant's own steps around the model: priming the prompt, the retrieval gate, the answer panel, language."""
