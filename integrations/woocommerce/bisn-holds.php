<?php
/**
 * Plugin Name: Back-in-stock holds
 * Description: Lets a shopper pay for the unit a back-in-stock notice held for them. The notifier holds a unit as
 *              an on-hold order stamped with the meta key _bisn_reservation_id (WooCommerce takes on-hold stock
 *              out of the storefront); these three filters let that one order be paid on its pay-for-order page.
 * Version:     1.0.0
 *
 * Install: copy this file to wp-content/mu-plugins/ (docs/PLATFORMS.md in the notifier's repository).
 * It changes nothing for any other order.
 */

defined( 'ABSPATH' ) || exit;

/**
 * Whether an order is a hold the notifier placed and that is still waiting for payment.
 *
 * @param mixed $order The order WooCommerce passes to the filter (it may pass none).
 * @return bool
 */
function bisn_is_live_hold( $order ) {
	return $order instanceof WC_Order
		&& $order->has_status( 'on-hold' )
		&& '' !== (string) $order->get_meta( '_bisn_reservation_id' );
}

// The pay-for-order page takes pending and failed orders only; a hold is on-hold, so that its unit is held.
add_filter(
	'woocommerce_valid_order_statuses_for_payment',
	function ( $statuses, $order = null ) {
		if ( bisn_is_live_hold( $order ) ) {
			$statuses[] = 'on-hold';
		}
		return $statuses;
	},
	10,
	2
);

// The held unit already left the stock count because this very order took it: the page must not refuse it as
// out of stock or short. Paying does not take it twice (the line is marked _reduced_stock).
add_filter(
	'woocommerce_pay_order_product_in_stock',
	function ( $in_stock, $product, $order ) {
		return bisn_is_live_hold( $order ) ? true : $in_stock;
	},
	10,
	3
);

add_filter(
	'woocommerce_pay_order_product_has_enough_stock',
	function ( $enough, $product, $order ) {
		return bisn_is_live_hold( $order ) ? true : $enough;
	},
	10,
	3
);
