<?php
/**
 * Plugin Name: Back-in-stock holds
 * Description: Holds the unit a back-in-stock notice offered in WooCommerce's own reserved stock, and turns the
 *              notifier's signed claim link into a cart that checks out through the shop's normal checkout
 *              (address, email, shipping, taxes). The order it makes carries the reservation id.
 * Version:     2.0.0
 *
 * Install: copy this file to wp-content/mu-plugins/ (docs/PLATFORMS.md in the notifier's repository).
 *
 * How a hold works:
 *  1. The notifier calls POST /wp-json/wc-bisn/v1/holds with its REST API key (a `wc-` namespace, so WooCommerce
 *     authenticates the key as it does for wc/v3). The plugin makes a checkout-draft order for the one unit,
 *     stamped with the reservation id, and reserves its stock with WooCommerce's ReserveStock until the hold ends
 *     (the wc_reserved_stock table: the unit cannot go into anybody else's cart, and stock_quantity is unchanged).
 *  2. The shopper follows a claim link the notifier signed (HMAC-SHA256 with a secret the shop shares, naming the
 *     reservation, the draft order and the claim's expiry). The plugin checks it, puts the unit in the shopper's
 *     cart with the draft order as their checkout's order, and sends them to the checkout.
 *  3. Block checkout goes on with that draft order; the classic checkout makes a new order, which takes the stamp
 *     while the draft gives its reservation back. Either way the paid order carries _bisn_reservation_id and its
 *     order.updated webhook converts the hold.
 *  4. A hold that ends unbought: the notifier cancels the draft (the reservation stops counting), or the
 *     reservation lapses by itself at its expiry.
 */

defined( 'ABSPATH' ) || exit;

const BISN_META         = '_bisn_reservation_id';
const BISN_EXPIRES_META = '_bisn_hold_expires';
const BISN_CREATED_VIA  = 'bisn-claim';
const BISN_DRAFT        = 'checkout-draft';
const BISN_NAMESPACE    = 'wc-bisn/v1';
const BISN_VERSION      = '2.0.0';
const BISN_DELIVERY     = '/webhooks/woocommerce';

/**
 * Where WooCommerce hooks wc_maybe_reduce_stock_levels (includes/wc-stock-functions.php). An inventory plugin that
 * removes it manages stock itself, and WooCommerce's own stock (what the notifier reads) no longer falls on a sale.
 */
const BISN_STOCK_HOOKS = array(
	'woocommerce_payment_complete',
	'woocommerce_order_status_completed',
	'woocommerce_order_status_processing',
	'woocommerce_order_status_on-hold',
);

// ---------------------------------------------------------------------------------------------- the claim link

/**
 * The bytes a claim's signature covers (chalicelib/platforms/woocommerce.py, claim_message, builds the same).
 */
function bisn_claim_message( $reservation_id, $order_id, $expires ) {
	return 'bisn-claim-v1|' . $reservation_id . '|' . (int) $order_id . '|' . (int) $expires;
}

/**
 * The secrets a claim may be signed with: BISN_CLAIM_SECRET from wp-config.php (space-separated during a
 * rotation) where it is defined, otherwise the secrets of the webhooks that deliver to the notifier, which the
 * notifier signs with.
 *
 * @return string[]
 */
function bisn_claim_secrets() {
	if ( defined( 'BISN_CLAIM_SECRET' ) ) {
		return array_values( array_filter( preg_split( '/\s+/', (string) constant( 'BISN_CLAIM_SECRET' ) ) ) );
	}
	$secrets = array();
	$store   = WC_Data_Store::load( 'webhook' );
	foreach ( $store->get_webhooks_ids() as $webhook_id ) {
		$webhook = wc_get_webhook( $webhook_id );
		if ( $webhook && bisn_is_our_delivery_url( $webhook->get_delivery_url() ) && '' !== $webhook->get_secret() ) {
			$secrets[] = $webhook->get_secret();
		}
	}
	return array_values( array_unique( $secrets ) );
}

function bisn_is_our_delivery_url( $url ) {
	$path = (string) wp_parse_url( (string) $url, PHP_URL_PATH );
	return '' !== $path && substr( rtrim( $path, '/' ), -strlen( BISN_DELIVERY ) ) === BISN_DELIVERY;
}

/**
 * Checks a claim link's query. The claim as an array (reservation_id, order_id, expires), or a WP_Error whose
 * status is 400 for a link that is incomplete or altered and 410 for one past its expiry.
 *
 * @param array    $query   The link's query parameters, unslashed.
 * @param int      $now     The time now (epoch seconds).
 * @param string[] $secrets The secrets it may be signed with.
 * @return array|WP_Error
 */
function bisn_verify_claim( $query, $now, $secrets ) {
	$incomplete = new WP_Error( 'bisn_claim_invalid', 'This link is not complete. Please use the link in your message.', array( 'status' => 400 ) );
	foreach ( array( 'bisn_claim', 'bisn_order', 'bisn_expires', 'bisn_sig' ) as $name ) {
		if ( ! isset( $query[ $name ] ) || ! is_string( $query[ $name ] ) || '' === $query[ $name ] ) {
			return $incomplete;
		}
	}
	$reservation_id = $query['bisn_claim'];
	if ( ! preg_match( '/^[A-Za-z0-9_-]{1,64}$/', $reservation_id )
		|| ! ctype_digit( $query['bisn_order'] ) || ! ctype_digit( $query['bisn_expires'] ) ) {
		return $incomplete;
	}
	$order_id = (int) $query['bisn_order'];
	$expires  = (int) $query['bisn_expires'];
	$message  = bisn_claim_message( $reservation_id, $order_id, $expires );
	$valid    = false;
	foreach ( explode( ',', $query['bisn_sig'] ) as $given ) {
		foreach ( $secrets as $secret ) {
			// Every pair is compared, with no early exit, so the time taken says nothing about which one matched.
			$valid = hash_equals( hash_hmac( 'sha256', $message, $secret ), strtolower( trim( $given ) ) ) || $valid;
		}
	}
	if ( ! $valid ) {
		return $incomplete;
	}
	if ( $expires <= $now ) {
		return new WP_Error( 'bisn_claim_expired', 'This hold has ended. You keep your place for the next restock.', array( 'status' => 410 ) );
	}
	return array(
		'reservation_id' => $reservation_id,
		'order_id'       => $order_id,
		'expires'        => $expires,
	);
}

// ---------------------------------------------------------------------------------------------- hold orders

/**
 * The reservation id an order carries ('' for none).
 */
function bisn_order_reservation( $order ) {
	return $order instanceof WC_Order ? (string) $order->get_meta( BISN_META ) : '';
}

/**
 * Whether an order is a hold's draft whose reservation is still running.
 */
function bisn_is_live_hold( $order, $now ) {
	return $order instanceof WC_Order
		&& $order->has_status( BISN_DRAFT )
		&& '' !== bisn_order_reservation( $order )
		&& (int) $order->get_meta( BISN_EXPIRES_META ) > $now;
}

/**
 * Whole minutes from now to a hold's end, at least one (ReserveStock takes minutes).
 */
function bisn_hold_minutes( $expires, $now ) {
	return max( 1, (int) ceil( ( (int) $expires - (int) $now ) / 60 ) );
}

/**
 * The order a reservation already has, in any status.
 */
function bisn_find_hold_order( $reservation_id ) {
	$found = wc_get_orders(
		array(
			'limit'      => 1,
			'type'       => 'shop_order',
			'status'     => array_keys( wc_get_order_statuses() ),
			'meta_key'   => BISN_META, // phpcs:ignore WordPress.DB.SlowDBQuery.slow_db_query_meta_key
			'meta_value' => $reservation_id, // phpcs:ignore WordPress.DB.SlowDBQuery.slow_db_query_meta_value
		)
	);
	return $found ? $found[0] : null;
}

/**
 * Units reserved by live hold drafts, by the id that manages their stock (a variation, or its parent where the
 * parent manages stock). Read once per request: a catalogue page asks for every product on it.
 *
 * @return array<int, int>
 */
function bisn_reserved_units( $now ) {
	static $units = null;
	if ( null !== $units ) {
		return $units;
	}
	$units  = array();
	$drafts = wc_get_orders(
		array(
			'limit'    => -1,
			'type'     => 'shop_order',
			'status'   => array( BISN_DRAFT ),
			'meta_key' => BISN_META, // phpcs:ignore WordPress.DB.SlowDBQuery.slow_db_query_meta_key
		)
	);
	foreach ( $drafts as $order ) {
		if ( ! bisn_is_live_hold( $order, $now ) ) {
			continue;
		}
		foreach ( $order->get_items() as $item ) {
			$product = $item->get_product();
			if ( $product && $product->managing_stock() ) {
				$id           = $product->get_stock_managed_by_id();
				$units[ $id ] = ( isset( $units[ $id ] ) ? $units[ $id ] : 0 ) + (int) $item->get_quantity();
			}
		}
	}
	return $units;
}

// ---------------------------------------------------------------------------------------------- REST routes

add_action( 'rest_api_init', 'bisn_register_routes' );

function bisn_register_routes() {
	register_rest_route(
		BISN_NAMESPACE,
		'/holds',
		array(
			'methods'             => 'POST',
			'callback'            => 'bisn_rest_place_hold',
			'permission_callback' => 'bisn_rest_can_hold',
		)
	);
	register_rest_route(
		BISN_NAMESPACE,
		'/store-check',
		array(
			'methods'             => 'GET',
			'callback'            => 'bisn_rest_store_check',
			'permission_callback' => 'bisn_rest_can_check',
		)
	);
}

// The orders controller's own checks: the key's user must be able to create orders, or to manage the shop.
function bisn_rest_can_hold() {
	if ( ! wc_rest_check_post_permissions( 'shop_order', 'create' ) ) {
		return new WP_Error( 'woocommerce_rest_cannot_create', 'Sorry, you are not allowed to create resources.', array( 'status' => rest_authorization_required_code() ) );
	}
	return true;
}

function bisn_rest_can_check() {
	if ( ! wc_rest_check_manager_permissions( 'settings', 'read' ) ) {
		return new WP_Error( 'woocommerce_rest_cannot_view', 'Sorry, you cannot list resources.', array( 'status' => rest_authorization_required_code() ) );
	}
	return true;
}

/**
 * POST /wc-bisn/v1/holds {reservation_id, product_id, variation_id, expires_at}: the reservation's draft order,
 * made and its unit reserved if it has none (201), or the one it has (200). 409 when the unit is not free.
 */
function bisn_rest_place_hold( $request ) {
	$now            = time();
	$reservation_id = $request->get_param( 'reservation_id' );
	$product_id     = $request->get_param( 'product_id' );
	$variation_id   = $request->get_param( 'variation_id' );
	$expires        = $request->get_param( 'expires_at' );
	if ( ! is_string( $reservation_id ) || ! preg_match( '/^[A-Za-z0-9_-]{1,64}$/', $reservation_id ) ) {
		return new WP_Error( 'rest_invalid_param', 'Invalid parameter(s): reservation_id', array( 'status' => 400 ) );
	}
	if ( ! is_int( $product_id ) || $product_id < 1 || ! is_int( $variation_id ) || $variation_id < 0 || ! is_int( $expires ) ) {
		return new WP_Error( 'rest_invalid_param', 'Invalid parameter(s): product_id, variation_id, expires_at', array( 'status' => 400 ) );
	}

	$existing = bisn_find_hold_order( $reservation_id );
	if ( $existing ) {
		return bisn_hold_response( $existing, 200 );
	}
	if ( $expires <= $now ) {
		return new WP_Error( 'rest_invalid_param', 'Invalid parameter(s): expires_at', array( 'status' => 400 ) );
	}
	$product = wc_get_product( $variation_id ? $variation_id : $product_id );
	if ( ! $product || $product->is_type( 'variable' ) || ( $variation_id && $product->get_parent_id() !== $product_id ) ) {
		return new WP_Error( 'bisn_invalid_product', 'No such product.', array( 'status' => 404 ) );
	}

	// Two calls for one reservation at once must not make two drafts: add_option is an insert on a unique key.
	$lock = 'bisn_hold_lock_' . $reservation_id;
	if ( ! add_option( $lock, $now, '', 'no' ) ) {
		if ( (int) get_option( $lock ) > $now - 60 ) {
			return new WP_Error( 'bisn_hold_busy', 'This hold is being placed; try again.', array( 'status' => 503 ) );
		}
		update_option( $lock, $now, 'no' ); // left by a request that died: take it over
	}
	try {
		$existing = bisn_find_hold_order( $reservation_id );
		if ( $existing ) {
			return bisn_hold_response( $existing, 200 );
		}
		$order = wc_create_order(
			array(
				'status'      => BISN_DRAFT,
				'created_via' => BISN_CREATED_VIA,
			)
		);
		if ( is_wp_error( $order ) ) {
			return new WP_Error( 'bisn_hold_failed', 'The hold order could not be made.', array( 'status' => 500 ) );
		}
		$order->add_product( $product, 1 );
		$order->update_meta_data( BISN_META, $reservation_id );
		$order->update_meta_data( BISN_EXPIRES_META, $expires );
		$order->calculate_totals( false );
		$order->save();
		try {
			( new Automattic\WooCommerce\Checkout\Helpers\ReserveStock() )->reserve_stock_for_order( $order, bisn_hold_minutes( $expires, $now ) );
		} catch ( Automattic\WooCommerce\Checkout\Helpers\ReserveStockException $e ) {
			$order->delete( true );
			return new WP_Error( $e->getErrorCode(), $e->getMessage(), array( 'status' => 409 ) );
		}
		return bisn_hold_response( $order, 201 );
	} finally {
		delete_option( $lock );
	}
}

function bisn_hold_response( $order, $status ) {
	$response = rest_ensure_response(
		array(
			'order_id'       => $order->get_id(),
			'status'         => $order->get_status(),
			'reservation_id' => bisn_order_reservation( $order ),
			'reserved_until' => (int) $order->get_meta( BISN_EXPIRES_META ),
		)
	);
	$response->set_status( $status );
	return $response;
}

/**
 * GET /wc-bisn/v1/store-check: what the notifier checks at every catalogue sync and shows on its dashboard.
 */
function bisn_rest_store_check() {
	$hooks = array();
	foreach ( BISN_STOCK_HOOKS as $hook ) {
		$hooks[ $hook ] = false !== has_action( $hook, 'wc_maybe_reduce_stock_levels' );
	}
	return rest_ensure_response(
		array(
			'plugin_version'                  => BISN_VERSION,
			'manage_stock'                    => get_option( 'woocommerce_manage_stock' ),
			'stock_reduction'                 => $hooks,
			'can_reduce_order_stock_filtered' => has_filter( 'woocommerce_can_reduce_order_stock' ) !== false,
			// ReserveStock works only once the table exists (schema 430, WooCommerce 4.3).
			'reserved_stock'                  => (int) get_option( 'woocommerce_schema_version', 0 ) >= 430,
		)
	);
}

// A product's or variation's REST resource, and so its webhook payload (WC_Webhook builds it through the same
// controller), carries the units live holds reserve: stock_quantity does not show them.
add_filter( 'woocommerce_rest_prepare_product_object', 'bisn_rest_add_reserved', 10, 2 );
add_filter( 'woocommerce_rest_prepare_product_variation_object', 'bisn_rest_add_reserved', 10, 2 );

function bisn_rest_add_reserved( $response, $product ) {
	if ( $product instanceof WC_Product && $product->managing_stock() && ! $product->is_type( 'variable' ) ) {
		$units                 = bisn_reserved_units( time() );
		$id                    = $product->get_stock_managed_by_id();
		$data                  = $response->get_data();
		$data['bisn_reserved'] = isset( $units[ $id ] ) ? $units[ $id ] : 0;
		$response->set_data( $data );
	}
	return $response;
}

// ---------------------------------------------------------------------------------------------- the storefront

add_action( 'template_redirect', 'bisn_maybe_redeem_claim' );

/**
 * A claim link opened on the storefront: a clear 400 or 410 page for a bad or ended one, else the unit in the
 * cart and the shopper at the checkout.
 */
function bisn_maybe_redeem_claim() {
	if ( ! isset( $_GET['bisn_claim'] ) ) { // phpcs:ignore WordPress.Security.NonceVerification.Recommended -- the HMAC is the check
		return;
	}
	$redeemed = bisn_redeem_claim( wp_unslash( $_GET ), time() ); // phpcs:ignore WordPress.Security.NonceVerification.Recommended
	if ( is_wp_error( $redeemed ) ) {
		$data = $redeemed->get_error_data();
		wp_die( esc_html( $redeemed->get_error_message() ), esc_html__( 'Back-in-stock hold', 'woocommerce' ), array( 'response' => (int) $data['status'] ) );
		return;
	}
	nocache_headers();
	wp_safe_redirect( $redeemed, 303 );
	exit;
}

/**
 * A claim link's query made into the shopper's cart: the checkout URL to send them to, or a WP_Error (400 for a
 * link that is incomplete or altered, 410 for a hold that has ended).
 *
 * @return string|WP_Error
 */
function bisn_redeem_claim( $query, $now ) {
	$claim = bisn_verify_claim( $query, $now, bisn_claim_secrets() );
	if ( is_wp_error( $claim ) ) {
		return $claim;
	}
	$order = wc_get_order( $claim['order_id'] );
	if ( ! bisn_is_live_hold( $order, $now ) || bisn_order_reservation( $order ) !== $claim['reservation_id'] ) {
		return new WP_Error( 'bisn_claim_expired', 'This hold has ended. You keep your place for the next restock.', array( 'status' => 410 ) );
	}
	bisn_put_hold_in_cart( $order, WC()->cart, WC()->session );
	return wc_get_checkout_url();
}

/**
 * The hold's unit in the shopper's cart, with its draft order as their checkout's order. The session names the
 * draft before the unit is added: the cart's stock checks leave out what the session's own order reserves
 * (wc_get_held_stock_quantity with order_awaiting_payment; the Store API's draft order likewise).
 */
function bisn_put_hold_in_cart( $order, $cart, $session ) {
	if ( ! $session->has_session() ) {
		$session->set_customer_session_cookie( true );
	}
	$reservation_id = bisn_order_reservation( $order );
	$session->set( 'order_awaiting_payment', $order->get_id() );
	$session->set( 'store_api_draft_order', $order->get_id() );
	$session->set(
		'bisn_claim',
		array(
			'order_id'       => $order->get_id(),
			'reservation_id' => $reservation_id,
		)
	);
	// Block checkout goes on with a draft only for the customer it was made for.
	if ( $order->get_customer_id() !== get_current_user_id() ) {
		$order->set_customer_id( get_current_user_id() );
		$order->save();
	}
	foreach ( $cart->get_cart() as $line ) {
		if ( isset( $line['bisn_reservation_id'] ) && $line['bisn_reservation_id'] === $reservation_id ) {
			return; // opened again: already in the cart
		}
	}
	foreach ( $order->get_items() as $item ) {
		$cart->add_to_cart(
			$item->get_product_id(),
			$item->get_quantity(),
			$item->get_variation_id(),
			array(),
			array( 'bisn_reservation_id' => $reservation_id )
		);
	}
}

// Block checkout reserves a draft's stock again each time it updates the draft (10 minutes by default): a hold's
// draft keeps the hold's own end instead.
add_filter( 'woocommerce_order_hold_stock_minutes', 'bisn_hold_stock_minutes', 10, 2 );

function bisn_hold_stock_minutes( $minutes, $order ) {
	if ( $order instanceof WC_Order && '' !== bisn_order_reservation( $order ) ) {
		$expires = (int) $order->get_meta( BISN_EXPIRES_META );
		return $expires > time() ? bisn_hold_minutes( $expires, time() ) : $minutes;
	}
	return $minutes;
}

// The classic checkout makes its own order rather than the draft: it takes the stamp (and the hold's end), and
// the draft gives its reservation back before WooCommerce reserves stock for the new order.
add_action( 'woocommerce_checkout_create_order', 'bisn_stamp_checkout_order', 10, 1 );

function bisn_stamp_checkout_order( $order ) {
	$session = WC()->session;
	$claim   = $session ? $session->get( 'bisn_claim' ) : null;
	if ( ! is_array( $claim ) || empty( $claim['order_id'] ) || (int) $claim['order_id'] === $order->get_id() ) {
		return;
	}
	$draft = wc_get_order( (int) $claim['order_id'] );
	if ( ! bisn_is_live_hold( $draft, time() ) || bisn_order_reservation( $draft ) !== $claim['reservation_id'] ) {
		return; // the hold ended first: this is an ordinary order, its stock checked as anybody's
	}
	$order->update_meta_data( BISN_META, $claim['reservation_id'] );
	$order->update_meta_data( BISN_EXPIRES_META, (int) $draft->get_meta( BISN_EXPIRES_META ) );
	( new Automattic\WooCommerce\Checkout\Helpers\ReserveStock() )->release_stock_for_order( $draft );
	$draft->update_status( 'cancelled', 'Checked out as a new order by the classic checkout.' );
	$session->set( 'bisn_claim', null );
}
