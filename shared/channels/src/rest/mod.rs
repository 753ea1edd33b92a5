//! The REST channel (`POST /v1/messages`, docs/api.md): Hermes's own, answered by a signed
//! callback or by polling.
