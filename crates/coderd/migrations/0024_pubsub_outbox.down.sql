DROP FUNCTION coder_relay_outbox(int);
DROP FUNCTION coder_publish(text, text);
DROP TABLE pubsub_outbox;
