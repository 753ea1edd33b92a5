//! Instagram, through Meta's Instagram Messaging API
//! (<https://developers.facebook.com/docs/messenger-platform/instagram>).
