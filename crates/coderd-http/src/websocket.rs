//! Buffer sizes for the WebSockets coderd keeps open by the thousand: one per connected agent
//! and one per relay stream.

use axum::extract::ws::WebSocketUpgrade;

/// tungstenite allocates each socket's read buffer at this size up front and zero-fills it up
/// to this size on every read, so all of it stays resident for the socket's life. Its 128 KiB
/// default was most of what an idle agent connection cost coderd (issue 15, P8b). Messages
/// larger than the buffer still arrive whole (the buffer grows for them); a smaller one only
/// means more, smaller reads from the socket under bulk transfer.
const READ_BUFFER: usize = 8 << 10;

/// `ws` with a read buffer sized for a socket that mostly idles.
pub fn long_lived(ws: WebSocketUpgrade) -> WebSocketUpgrade {
    ws.read_buffer_size(READ_BUFFER)
}
