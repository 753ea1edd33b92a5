//! A client of OpenAI-compatible embeddings endpoints.
