//! A real browser for the console's tests (docs/console.md): Debian's headless Chromium,
//! driven by its own chromedriver over the W3C WebDriver protocol
//! (<https://www.w3.org/TR/webdriver2/>). The handful of commands the tests send (open a
//! URL, find, type, click, read the page, take a screenshot, ask for an alert) are spoken
//! with the kit's HTTP client: a client crate would bring some twenty crates into every
//! test build for them.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

/// The W3C name of an element reference in a command's answer.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Where Debian puts them (`apt-get install chromium chromium-driver`).
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// One headless Chromium session, ended (with its driver) when dropped.
pub struct Browser {
    http: reqwest::Client,
    session: String,
    driver: tokio::process::Child,
}

impl Browser {
    /// A browser `width` pixels wide; `None` when Chromium or its driver is not installed
    /// (`scripts/test` installs both).
    pub async fn start(width: u32) -> Option<Self> {
        if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        hermes_net::install_crypto_provider();
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        crate::eventually(Duration::from_secs(30), "chromedriver is ready", || async {
            let ready = http.get(format!("{base}/status")).send().await.ok()?;
            let v: Value = ready.json().await.ok()?;
            (v["value"]["ready"] == true).then_some(())
        })
        .await;
        let created: Value = http
            .post(format!("{base}/session"))
            .json(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": CHROMIUM,
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                             "--disable-dev-shm-usage", format!("--window-size={width},900")],
                },
            }}}))
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("a session");
        let id = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"));
        Some(Self {
            session: format!("{base}/session/{id}"),
            http,
            driver,
        })
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("chromedriver answers");
        resp.json::<Value>().await.expect("a WebDriver answer")["value"].clone()
    }

    /// Open `url` and wait until it is loaded (WebDriver's navigation does).
    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The page's URL now.
    pub async fn url(&self) -> String {
        let v = self.command(reqwest::Method::GET, "/url", None).await;
        v.as_str().unwrap_or_default().to_string()
    }

    /// Wait until the page's URL ends with `suffix` (a click's navigation may still be under
    /// way when the click returns), and return it.
    pub async fn wait_for_url(&self, suffix: &str) -> String {
        crate::eventually(
            Duration::from_secs(30),
            &format!("the browser at …{suffix}"),
            || async {
                let url = self.url().await;
                url.ends_with(suffix).then_some(url)
            },
        )
        .await
    }

    /// The page's HTML as the browser holds it.
    pub async fn source(&self) -> String {
        let v = self.command(reqwest::Method::GET, "/source", None).await;
        v.as_str().unwrap_or_default().to_string()
    }

    async fn element(&self, css: &str) -> String {
        let v = self
            .command(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    /// Type `text` into the element `css` names.
    pub async fn fill(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Click the element `css` names, and let what it starts load.
    pub async fn click(&self, css: &str) {
        let id = self.element(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// The text of an open alert, prompt or confirm dialog; `None` when none is open.
    pub async fn alert(&self) -> Option<String> {
        let v = self
            .command(reqwest::Method::GET, "/alert/text", None)
            .await;
        v.as_str().map(str::to_string)
    }

    /// Resize the window to `width` × `height` pixels.
    pub async fn resize(&self, width: u32, height: u32) {
        self.command(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }

    /// Save a PNG of the window to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let v = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let png = BASE64
            .decode(v.as_str().expect("a screenshot"))
            .expect("base64");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshots' directory");
        }
        std::fs::write(path, png).expect("the screenshot is written");
    }

    /// End the session and its driver.
    pub async fn quit(mut self) {
        let _ = self.http.delete(&self.session).send().await;
        let _ = self.driver.kill().await;
    }
}
