//! Telegram, through the Bot API (<https://core.telegram.org/bots/api>): webhook updates in
//! (<https://core.telegram.org/bots/api#setwebhook>), `sendMessage` and friends out.
