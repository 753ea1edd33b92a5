//! Sessions: one conversation per user and channel, rolled over after the idle timeout.
