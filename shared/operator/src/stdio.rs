//! The stdio transport of the MCP specification (`hermes mcp serve`): one JSON-RPC message
//! per line on stdin, one answer per line on stdout, nothing else on stdout (logs go to
//! stderr). Calls run concurrently, as a client may send a `ping` while an `events_wait`
//! blocks, so answers can come in another order than their requests (JSON-RPC matches them
//! by id). At the end of input the stop signal is raised, so a blocking call returns early,
//! the calls in flight finish, and [`serve`] returns.

use hermes_mcp_server::{Reply, RpcCode, error, handle, parse};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::{Operator, SERVER_INFO};

/// The longest message line read; a longer one is answered with an error and skipped.
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// Serve `op` on `input` and `output` until the input ends.
pub async fn serve<R, W>(op: Operator, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (answers, rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(write_lines(rx, output));
    let mut calls = JoinSet::new();
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') && line.len() > MAX_LINE {
            skip_line(&mut input).await?;
            let _ = answers.send(error(
                Value::Null,
                RpcCode::InvalidRequest,
                format!("a message may be at most {MAX_LINE} bytes"),
            ));
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse(&line) {
            Err(Reply::Message { body, .. }) => {
                let _ = answers.send(body);
            }
            Err(Reply::Nothing) => {}
            Ok(message) => {
                let op = op.clone();
                let answers = answers.clone();
                calls.spawn(async move {
                    if let Reply::Message { body, .. } = handle(&SERVER_INFO, &op, message).await {
                        let _ = answers.send(body);
                    }
                });
            }
        }
        while let Some(done) = calls.try_join_next() {
            reap(done);
        }
    }
    tracing::debug!("stdin ended; finishing the calls in flight");
    op.ctx.stop.cancel();
    while let Some(done) = calls.join_next().await {
        reap(done);
    }
    drop(answers);
    writer.await.map_err(std::io::Error::other)?
}

/// A finished call: a panic left its request unanswered, which only the log can say.
fn reap(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        tracing::error!(error = %e, "an operator MCP call panicked; its request is unanswered");
    }
}

/// Read and drop the rest of an overlong line.
async fn skip_line<R: AsyncBufReadExt + Unpin>(input: &mut R) -> std::io::Result<()> {
    let mut scratch = Vec::new();
    loop {
        scratch.clear();
        let n = input
            .take(64 * 1024)
            .read_until(b'\n', &mut scratch)
            .await?;
        if n == 0 || scratch.last() == Some(&b'\n') {
            return Ok(());
        }
    }
}

/// Write each answer as one line, flushed (the client reads as we write).
async fn write_lines<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<Value>,
    mut output: W,
) -> std::io::Result<()> {
    while let Some(body) = rx.recv().await {
        let mut line = body.to_string();
        line.push('\n');
        output.write_all(line.as_bytes()).await?;
        output.flush().await?;
    }
    Ok(())
}
