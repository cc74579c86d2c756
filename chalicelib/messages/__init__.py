"""The messages a shopper receives: their words, each language's text, the caps on sending and the sending."""
