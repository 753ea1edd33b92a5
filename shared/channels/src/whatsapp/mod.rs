//! WhatsApp, through Meta's Cloud API
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api>) or 360dialog, which relays the
//! same payloads (<https://docs.360dialog.com/docs/waba-messaging>).
