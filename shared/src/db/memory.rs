//! The user's memory: structural keys and free facts with their embeddings.
