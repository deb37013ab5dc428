"""The docs corpus: Markdown and MDX pages read into sections and chunks, with the files beside them."""
