"""The Slack app: listeners, capture, `/judge`, the message shortcut, buttons and App Home."""
