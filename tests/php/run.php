<?php
/**
 * Unit tests of integrations/woocommerce/bisn-holds.php under plain PHP: `php tests/php/run.php` (make test-php).
 * WordPress and WooCommerce are the stand-ins in stubs.php. Every function here named test_* runs once, from the
 * hooks the plugin registered when loaded; a failed check stops that test and is reported; the exit status is 1
 * when any test failed.
 */

require __DIR__ . '/stubs.php';
require __DIR__ . '/../../integrations/woocommerce/bisn-holds.php';

use Automattic\WooCommerce\Checkout\Helpers\ReserveStock;

const NOW = 1800000000;

class Failed extends Exception {}

function check( $condition, $what ) {
	if ( ! $condition ) {
		throw new Failed( $what );
	}
}

function same( $expected, $actual, $what ) {
	check( $expected === $actual, $what . ': expected ' . var_export( $expected, true ) . ', got ' . var_export( $actual, true ) );
}

function claim_query( $secret, $reservation = 'res_1', $order = 501, $expires = 2000000000 ) {
	return array(
		'bisn_claim'   => $reservation,
		'bisn_order'   => (string) $order,
		'bisn_expires' => (string) $expires,
		'bisn_sig'     => hash_hmac( 'sha256', bisn_claim_message( $reservation, $order, $expires ), $secret ),
	);
}

function held_draft( $id = 501, $expires = null, $product = null ) {
	$order = new WC_Order( $id, 'checkout-draft', 'bisn-claim' );
	$order->update_meta_data( '_bisn_reservation_id', 'res_1' );
	$order->update_meta_data( '_bisn_hold_expires', $expires ?? time() + 1800 );
	$order->add_product( $product ?? new WC_Product( 101 ), 1 );
	$order->save();
	return $order;
}

function place( array $params ) {
	return bisn_rest_place_hold( new WP_REST_Request( $params ) );
}

function hold_params( array $changes = array() ) {
	return array_merge(
		array(
			'reservation_id' => 'res_1',
			'product_id'     => 107,
			'variation_id'   => 109,
			'expires_at'     => time() + 1800,
		),
		$changes
	);
}

// ------------------------------------------------------------------ the claim link

// The same vector as tests/unit/test_woocommerce_contract.py: the app and the plugin sign the same bytes.
function test_the_claim_signature_is_the_apps() {
	same( 'bisn-claim-v1|res_1|501|2000000000', bisn_claim_message( 'res_1', 501, 2000000000 ), 'message' );
	same(
		'da1b4a7636f6441b0ef11755fe26b2fc24212f9ba2332d530b49cc7073fc650f',
		hash_hmac( 'sha256', bisn_claim_message( 'res_1', 501, 2000000000 ), 'w' ),
		'signature'
	);
}

function test_a_valid_claim_is_read() {
	$claim = bisn_verify_claim( claim_query( 'w' ), NOW, array( 'w' ) );
	same( array( 'reservation_id' => 'res_1', 'order_id' => 501, 'expires' => 2000000000 ), $claim, 'claim' );
}

function test_a_claim_signed_with_either_secret_of_a_rotation_is_read() {
	$query             = claim_query( 'new' );
	$query['bisn_sig'] = hash_hmac( 'sha256', bisn_claim_message( 'res_1', 501, 2000000000 ), 'old' ) . ',' . $query['bisn_sig'];
	check( ! is_wp_error( bisn_verify_claim( $query, NOW, array( 'new' ) ) ), 'the new secret signs one of them' );
}

function test_an_altered_or_incomplete_claim_is_a_400() {
	$altered = array(
		array( 'bisn_order' => '502' ),
		array( 'bisn_expires' => '2000000001' ),
		array( 'bisn_claim' => 'res_2' ),
		array( 'bisn_sig' => str_repeat( '0', 64 ) ),
		array( 'bisn_order' => '5O1' ),
		array( 'bisn_claim' => 'res 1' ),
		array( 'bisn_sig' => array( 'x' ) ),
	);
	foreach ( $altered as $change ) {
		$error = bisn_verify_claim( array_merge( claim_query( 'w' ), $change ), NOW, array( 'w' ) );
		check( is_wp_error( $error ), 'refused: ' . json_encode( $change ) );
		same( 400, $error->get_error_data()['status'], 'status for ' . json_encode( $change ) );
	}
	$missing = claim_query( 'w' );
	unset( $missing['bisn_sig'] );
	same( 400, bisn_verify_claim( $missing, NOW, array( 'w' ) )->get_error_data()['status'], 'no signature' );
	same( 400, bisn_verify_claim( claim_query( 'w' ), NOW, array() )->get_error_data()['status'], 'no secret' );
}

function test_a_claim_past_its_expiry_is_a_410() {
	$error = bisn_verify_claim( claim_query( 'w', 'res_1', 501, NOW ), NOW, array( 'w' ) );
	same( 410, $error->get_error_data()['status'], 'status' );
}

function test_the_secrets_are_the_constant_or_our_webhooks() {
	$GLOBALS['bisn_test']['webhooks'] = array(
		7 => new WC_Webhook( 'https://api.example/webhooks/woocommerce', 'ours' ),
		8 => new WC_Webhook( 'https://crm.example/hook', 'theirs' ),
		9 => new WC_Webhook( 'https://api.example/webhooks/woocommerce/', 'ours' ),
	);
	same( array( 'ours' ), bisn_claim_secrets(), 'webhook secrets' );
}

// ------------------------------------------------------------------ placing a hold

function test_a_hold_is_a_draft_order_with_its_unit_reserved_until_the_hold_ends() {
	$GLOBALS['bisn_test']['products'][109] = new WC_Product( 109, 'variation', 107 );
	ReserveStock::$free[109]             = 1;
	$expires                             = time() + 1800;
	$response                            = place( hold_params( array( 'expires_at' => $expires ) ) );
	same( 201, $response->get_status(), 'status' );
	$order = wc_get_order( $response->get_data()['order_id'] );
	same( 'checkout-draft', $order->get_status(), 'order status' );
	same( 'bisn-claim', $order->created_via, 'created via' );
	same( 'res_1', $order->get_meta( '_bisn_reservation_id' ), 'stamp' );
	same( $expires, $order->get_meta( '_bisn_hold_expires' ), 'hold end' );
	same( array( array( 'reserve', $order->get_id(), 30 ) ), ReserveStock::$calls, 'reserved for the hold window' );
	same( 0, ReserveStock::$free[109], 'the unit is reserved' );
	same( false, get_option( 'bisn_hold_lock_res_1' ), 'the lock is let go' );
}

function test_placing_again_answers_the_same_draft_and_reserves_nothing_more() {
	$GLOBALS['bisn_test']['products'][109] = new WC_Product( 109, 'variation', 107 );
	ReserveStock::$free[109]             = 2;
	$first                               = place( hold_params() );
	$second                              = place( hold_params() );
	same( 200, $second->get_status(), 'status' );
	same( $first->get_data()['order_id'], $second->get_data()['order_id'], 'order' );
	same( 1, ReserveStock::$free[109], 'one unit reserved' );
}

function test_a_unit_that_is_not_free_is_a_409_and_leaves_no_order() {
	$GLOBALS['bisn_test']['products'][109] = new WC_Product( 109, 'variation', 107 );
	ReserveStock::$free[109]             = 0;
	$error                               = place( hold_params() );
	check( is_wp_error( $error ), 'refused' );
	same( 'woocommerce_product_not_enough_stock', $error->get_error_code(), 'code' );
	same( 409, $error->get_error_data()['status'], 'status' );
	same( array(), $GLOBALS['bisn_test']['orders'], 'no order left behind' );
}

function test_bad_hold_requests_are_4xx() {
	$GLOBALS['bisn_test']['products'][109] = new WC_Product( 109, 'variation', 107 );
	$GLOBALS['bisn_test']['products'][107] = new WC_Product( 107, 'variable' );
	$cases = array(
		array( array( 'reservation_id' => '' ), 400 ),
		array( array( 'reservation_id' => str_repeat( 'a', 65 ) ), 400 ),
		array( array( 'product_id' => '107' ), 400 ),
		array( array( 'variation_id' => -1 ), 400 ),
		array( array( 'expires_at' => time() - 1 ), 400 ),
		array( array( 'variation_id' => 0 ), 404 ),
		array( array( 'product_id' => 999 ), 404 ),
		array( array( 'variation_id' => 555 ), 404 ),
	);
	foreach ( $cases as list( $change, $status ) ) {
		$error = place( hold_params( $change ) );
		check( is_wp_error( $error ), 'refused: ' . json_encode( $change ) );
		same( $status, $error->get_error_data()['status'], 'status for ' . json_encode( $change ) );
	}
}

function test_a_hold_being_placed_is_a_503_to_try_again() {
	$GLOBALS['bisn_test']['products'][109] = new WC_Product( 109, 'variation', 107 );
	ReserveStock::$free[109]             = 1;
	add_option( 'bisn_hold_lock_res_1', time() );
	same( 503, place( hold_params() )->get_error_data()['status'], 'status' );
}

function test_the_routes_need_the_keys_permissions() {
	bisn_register_routes();
	same( 'bisn_rest_can_hold', $GLOBALS['bisn_test']['routes']['wc-bisn/v1/holds']['permission_callback'], 'holds' );
	$GLOBALS['bisn_test']['can'] = false;
	same( 401, bisn_rest_can_hold()->get_error_data()['status'], 'no key' );
	$GLOBALS['bisn_test']['user'] = 3;
	same( 403, bisn_rest_can_check()->get_error_data()['status'], 'a key without the permission' );
}

// ------------------------------------------------------------------ levels and the store check

function test_a_products_resource_carries_what_live_holds_reserve() {
	$product = new WC_Product( 101 );
	held_draft( 501, time() + 600, $product );
	held_draft( 502, time() - 1, $product ); // lapsed
	$response = bisn_rest_add_reserved( new WP_REST_Response( array( 'stock_quantity' => 3 ) ), $product );
	same( array( 'stock_quantity' => 3, 'bisn_reserved' => 1 ), $response->get_data(), 'resource' );
	$untracked = bisn_rest_add_reserved( new WP_REST_Response( array( 'id' => 5 ) ), new WC_Product( 5, 'simple', 0, false ) );
	same( array( 'id' => 5 ), $untracked->get_data(), 'no stock managed, nothing added' );
	check( has_filter( 'woocommerce_rest_prepare_product_variation_object', 'bisn_rest_add_reserved' ) !== false, 'variations too' );
}

function test_the_store_check_names_an_unhooked_stock_reduction() {
	foreach ( BISN_STOCK_HOOKS as $hook ) {
		add_action( $hook, 'wc_maybe_reduce_stock_levels' );
	}
	update_option( 'woocommerce_manage_stock', 'yes' );
	$report = bisn_rest_store_check()->get_data();
	same( array_fill_keys( BISN_STOCK_HOOKS, true ), $report['stock_reduction'], 'all hooked' );
	same( 'yes', $report['manage_stock'], 'setting' );
	remove_action( 'woocommerce_payment_complete', 'wc_maybe_reduce_stock_levels' );
	same( false, bisn_rest_store_check()->get_data()['stock_reduction']['woocommerce_payment_complete'], 'unhooked' );
	same( false, $report['can_reduce_order_stock_filtered'], 'nobody filters it' );
}

// ------------------------------------------------------------------ the storefront

function test_a_claim_puts_the_unit_in_the_cart_with_its_draft_as_the_checkouts_order() {
	$order = held_draft( 501, time() + 600, new WC_Product( 109, 'variation', 107 ) );
	bisn_put_hold_in_cart( $order, WC()->cart, WC()->session );
	$session = WC()->session;
	same( 501, $session->get( 'order_awaiting_payment' ), 'classic checkout order' );
	same( 501, $session->get( 'store_api_draft_order' ), 'block checkout draft' );
	same( array( array( 'add', 501 ) ), WC()->cart->log, 'the session names the draft before the cart checks stock' );
	$line = array_values( WC()->cart->get_cart() )[0];
	same( array( 107, 109, 1, 'res_1' ), array( $line['product_id'], $line['variation_id'], $line['quantity'], $line['bisn_reservation_id'] ), 'line' );
	bisn_put_hold_in_cart( $order, WC()->cart, WC()->session );
	same( 1, count( WC()->cart->get_cart() ), 'opened twice, one line' );
}

function test_opening_a_claim_link_fills_the_cart_and_answers_the_checkout() {
	$GLOBALS['bisn_test']['webhooks'] = array( 7 => new WC_Webhook( 'https://api.example/webhooks/woocommerce', 'w' ) );
	held_draft( 501, time() + 600 );
	$url = bisn_redeem_claim( claim_query( 'w', 'res_1', 501, time() + 600 ), time() );
	same( 'https://shop.example/checkout/', $url, 'checkout' );
	same( 1, count( WC()->cart->get_cart() ), 'in the cart' );
	check( has_action( 'template_redirect', 'bisn_maybe_redeem_claim' ) !== false, 'hooked on the storefront' );
}

function test_an_ended_hold_is_a_410_page() {
	$GLOBALS['bisn_test']['webhooks'] = array( 7 => new WC_Webhook( 'https://api.example/webhooks/woocommerce', 'w' ) );
	held_draft( 501, time() + 600 )->update_status( 'cancelled' );
	$_GET = claim_query( 'w', 'res_1', 501, time() + 600 );
	bisn_maybe_redeem_claim();
	same( 410, $GLOBALS['bisn_test']['died'][1], 'status' );
	same( null, $GLOBALS['bisn_test']['redirect'], 'no redirect' );
	same( array(), WC()->cart->get_cart(), 'nothing in the cart' );
}

function test_a_tampered_link_is_a_400_page() {
	$GLOBALS['bisn_test']['webhooks'] = array( 7 => new WC_Webhook( 'https://api.example/webhooks/woocommerce', 'w' ) );
	held_draft( 501, time() + 600 );
	$_GET = array_merge( claim_query( 'w', 'res_1', 501, time() + 600 ), array( 'bisn_order' => '502' ) );
	bisn_maybe_redeem_claim();
	same( 400, $GLOBALS['bisn_test']['died'][1], 'status' );
}

function test_a_holds_draft_keeps_the_holds_end_when_checkout_reserves_again() {
	$order = held_draft( 501, time() + 25 * 60 );
	same( 25, apply_filters( 'woocommerce_order_hold_stock_minutes', 10, $order ), 'the hold end' );
	same( 10, apply_filters( 'woocommerce_order_hold_stock_minutes', 10, new WC_Order( 9 ) ), 'any other order' );
}

function test_the_classic_checkouts_order_takes_the_stamp_and_the_draft_lets_go() {
	$product                 = new WC_Product( 101 );
	ReserveStock::$free[101] = 1;
	$draft                   = held_draft( 501, time() + 600, $product );
	( new ReserveStock() )->reserve_stock_for_order( $draft );
	bisn_put_hold_in_cart( $draft, WC()->cart, WC()->session );
	$order = new WC_Order( 600, 'pending', 'checkout' );
	do_action( 'woocommerce_checkout_create_order', $order, array() );
	same( 'res_1', $order->get_meta( '_bisn_reservation_id' ), 'stamp' );
	same( 'cancelled', $draft->get_status(), 'draft' );
	same( 1, ReserveStock::$free[101], 'the draft reserves nothing now' );
	$later = new WC_Order( 601, 'pending', 'checkout' );
	do_action( 'woocommerce_checkout_create_order', $later, array() );
	same( '', $later->get_meta( '_bisn_reservation_id' ), 'one order only' );
}

function test_a_checkout_after_the_hold_ended_is_an_ordinary_order() {
	$draft = held_draft( 501, time() + 600 );
	bisn_put_hold_in_cart( $draft, WC()->cart, WC()->session );
	$draft->update_status( 'cancelled' ); // the notifier released it
	$order = new WC_Order( 600, 'pending', 'checkout' );
	do_action( 'woocommerce_checkout_create_order', $order, array() );
	same( '', $order->get_meta( '_bisn_reservation_id' ), 'no stamp' );
}

// ------------------------------------------------------------------ the runner

$failed = 0;
$ran    = 0;
foreach ( get_defined_functions()['user'] as $name ) {
	if ( 0 !== strpos( $name, 'test_' ) ) {
		continue;
	}
	bisn_test_reset();
	$_GET = array();
	++$ran;
	try {
		$name();
		echo '.';
	} catch ( Throwable $e ) {
		++$failed;
		echo "\nFAILED {$name}: " . $e->getMessage() . ( $e instanceof Failed ? '' : ' (' . get_class( $e ) . ' at line ' . $e->getLine() . ')' ) . "\n";
	}
}
echo "\n{$ran} PHP tests, {$failed} failed\n";
exit( $failed ? 1 : 0 );
