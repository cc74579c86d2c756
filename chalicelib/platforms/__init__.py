"""Store platforms: one connector seam (base.py) with a generic, a Shopify and a WooCommerce implementation.

Everything that depends on a platform's wire format lives in this package; the domain keeps speaking SKUs.
"""
