//! Noise smoothing: BASS (single pass), multi-pass spike smoothing with the
//! sliding window, and IMR-Pathload's window average and D4 wavelet.

pub mod bass;
pub mod imr;
pub mod multipass;
