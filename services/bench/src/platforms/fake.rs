//! A fake platform API on loopback: the routes it answers, served until the bench ends.

use axum::Router;
use axum::routing::MethodRouter;
use tokio::net::TcpListener;

/// Serve `routes` (path and handler) with `state` on a free loopback port; its
/// `http://host:port`.
pub async fn serve<S: Clone + Send + Sync + 'static>(
    routes: Vec<(String, MethodRouter<S>)>,
    state: S,
) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = routes
        .into_iter()
        .fold(Router::new(), |app, (path, route)| app.route(&path, route))
        .with_state(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}
