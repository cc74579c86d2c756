"""Back-in-stock notifier: the code that ships to Lambda."""
