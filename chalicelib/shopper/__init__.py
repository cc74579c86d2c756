"""What a shopper sees and presses: the widget, the pages their links open, and what those pages do."""
