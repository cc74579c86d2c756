<?php
/**
 * The few WordPress and WooCommerce functions and classes the plugin calls, as in-memory stand-ins, so that its
 * hooks and routes run under plain `php` with no WordPress. Each keeps only the behaviour the plugin relies on;
 * the signatures follow WordPress (wp-includes/plugin.php, rest-api, option.php) and WooCommerce (WC_Order,
 * WC_Cart::add_to_cart, WC_Session, Automattic\WooCommerce\Checkout\Helpers\ReserveStock).
 */

namespace Automattic\WooCommerce\Checkout\Helpers {
	class ReserveStockException extends \Exception {
		private $error_code;
		public function __construct( $code, $message, $http = 403 ) {
			parent::__construct( $message, $http );
			$this->error_code = $code;
		}
		public function getErrorCode() {
			return $this->error_code;
		}
	}

	// Stands in for the wc_reserved_stock table: rows by order id; `free` units per product id.
	final class ReserveStock {
		public static $rows = array();
		public static $free = array();
		public static $calls = array();
		public function reserve_stock_for_order( $order, $minutes = 0 ) {
			self::$calls[] = array( 'reserve', $order->get_id(), $minutes );
			foreach ( $order->get_items() as $item ) {
				$id = $item->get_product()->get_stock_managed_by_id();
				if ( ( self::$free[ $id ] ?? 0 ) < $item->get_quantity() ) {
					throw new ReserveStockException( 'woocommerce_product_not_enough_stock', 'Not enough units.', 403 );
				}
				self::$free[ $id ] -= $item->get_quantity();
				self::$rows[ $order->get_id() ] = array( $id, $item->get_quantity() );
			}
		}
		public function release_stock_for_order( $order ) {
			self::$calls[] = array( 'release', $order->get_id() );
			if ( isset( self::$rows[ $order->get_id() ] ) ) {
				list( $id, $quantity ) = self::$rows[ $order->get_id() ];
				self::$free[ $id ]    += $quantity;
				unset( self::$rows[ $order->get_id() ] );
			}
		}
	}
}

namespace {
	define( 'ABSPATH', __DIR__ . '/' );

	$GLOBALS['bisn_test'] = array();

	// The hooks the plugin registered when it was loaded: each test starts from them.
	function bisn_test_reset() {
		static $loaded = null;
		if ( null === $loaded ) {
			$loaded = $GLOBALS['bisn_test']['filters'] ?? array();
		}
		$GLOBALS['bisn_test'] = array(
			'filters'   => $loaded,
			'routes'    => array(),
			'options'   => array(),
			'orders'    => array(),
			'products'  => array(),
			'webhooks'  => array(),
			'next_id'   => 501,
			'user'      => 0,
			'can'       => true,
			'redirect'  => null,
			'died'      => null,
		);
		Automattic\WooCommerce\Checkout\Helpers\ReserveStock::$rows  = array();
		Automattic\WooCommerce\Checkout\Helpers\ReserveStock::$free  = array();
		Automattic\WooCommerce\Checkout\Helpers\ReserveStock::$calls = array();
		WC()->cart    = new WC_Cart();
		WC()->session = new WC_Session_Handler();
	}

	// --- hooks (wp-includes/plugin.php)
	function add_filter( $hook, $callback, $priority = 10, $accepted_args = 1 ) {
		$GLOBALS['bisn_test']['filters'][ $hook ][] = array( $callback, $accepted_args );
		return true;
	}
	function add_action( $hook, $callback, $priority = 10, $accepted_args = 1 ) {
		return add_filter( $hook, $callback, $priority, $accepted_args );
	}
	function remove_action( $hook, $callback ) {
		foreach ( $GLOBALS['bisn_test']['filters'][ $hook ] ?? array() as $i => $entry ) {
			if ( $entry[0] === $callback ) {
				unset( $GLOBALS['bisn_test']['filters'][ $hook ][ $i ] );
			}
		}
		return true;
	}
	function has_filter( $hook, $callback = false ) {
		$entries = $GLOBALS['bisn_test']['filters'][ $hook ] ?? array();
		if ( false === $callback ) {
			return ! empty( $entries );
		}
		foreach ( $entries as $entry ) {
			if ( $entry[0] === $callback ) {
				return 10; // WordPress answers the priority
			}
		}
		return false;
	}
	function has_action( $hook, $callback = false ) {
		return has_filter( $hook, $callback );
	}
	function apply_filters( $hook, $value, ...$args ) {
		foreach ( $GLOBALS['bisn_test']['filters'][ $hook ] ?? array() as $entry ) {
			$value = call_user_func_array( $entry[0], array_slice( array_merge( array( $value ), $args ), 0, $entry[1] ) );
		}
		return $value;
	}
	function do_action( $hook, ...$args ) {
		foreach ( $GLOBALS['bisn_test']['filters'][ $hook ] ?? array() as $entry ) {
			call_user_func_array( $entry[0], array_slice( $args, 0, $entry[1] ) );
		}
	}

	// --- options, users, escaping
	function add_option( $name, $value = '', $deprecated = '', $autoload = 'yes' ) {
		if ( array_key_exists( $name, $GLOBALS['bisn_test']['options'] ) ) {
			return false;
		}
		$GLOBALS['bisn_test']['options'][ $name ] = $value;
		return true;
	}
	function get_option( $name, $default = false ) {
		return $GLOBALS['bisn_test']['options'][ $name ] ?? $default;
	}
	function update_option( $name, $value, $autoload = null ) {
		$GLOBALS['bisn_test']['options'][ $name ] = $value;
		return true;
	}
	function delete_option( $name ) {
		unset( $GLOBALS['bisn_test']['options'][ $name ] );
		return true;
	}
	function get_current_user_id() {
		return $GLOBALS['bisn_test']['user'];
	}
	function esc_html( $text ) {
		return htmlspecialchars( (string) $text, ENT_QUOTES );
	}
	function esc_html__( $text, $domain = 'default' ) {
		return esc_html( $text );
	}
	function wp_unslash( $value ) {
		return $value;
	}
	function wp_parse_url( $url, $component = -1 ) {
		return parse_url( $url, $component );
	}
	function is_wp_error( $thing ) {
		return $thing instanceof WP_Error;
	}
	function nocache_headers() {}
	function wp_safe_redirect( $location, $status = 302 ) {
		$GLOBALS['bisn_test']['redirect'] = array( $location, $status );
		return true;
	}
	function wp_die( $message = '', $title = '', $args = array() ) {
		$GLOBALS['bisn_test']['died'] = array( $message, $args['response'] ?? 500 );
	}
	function wc_get_checkout_url() {
		return 'https://shop.example/checkout/';
	}

	class WP_Error {
		private $code;
		private $message;
		private $data;
		public function __construct( $code = '', $message = '', $data = '' ) {
			$this->code    = $code;
			$this->message = $message;
			$this->data    = $data;
		}
		public function get_error_code() {
			return $this->code;
		}
		public function get_error_message() {
			return $this->message;
		}
		public function get_error_data() {
			return $this->data;
		}
	}

	// --- REST
	class WP_REST_Response {
		private $data;
		private $status = 200;
		public function __construct( $data = null ) {
			$this->data = $data;
		}
		public function get_data() {
			return $this->data;
		}
		public function set_data( $data ) {
			$this->data = $data;
		}
		public function get_status() {
			return $this->status;
		}
		public function set_status( $status ) {
			$this->status = $status;
		}
	}
	class WP_REST_Request {
		private $params;
		public function __construct( $params ) {
			$this->params = $params;
		}
		public function get_param( $name ) {
			return $this->params[ $name ] ?? null;
		}
	}
	function rest_ensure_response( $data ) {
		return $data instanceof WP_REST_Response ? $data : new WP_REST_Response( $data );
	}
	function register_rest_route( $namespace, $route, $args ) {
		$GLOBALS['bisn_test']['routes'][ $namespace . $route ] = $args;
		return true;
	}
	function rest_authorization_required_code() {
		return get_current_user_id() ? 403 : 401;
	}
	function wc_rest_check_post_permissions( $post_type, $context = 'read', $object_id = 0 ) {
		return $GLOBALS['bisn_test']['can'];
	}
	function wc_rest_check_manager_permissions( $object, $context = 'read' ) {
		return $GLOBALS['bisn_test']['can'];
	}

	// --- products, orders, cart, session
	class WC_Product {
		public $id;
		public $type;
		public $parent_id;
		public $manages;
		public function __construct( $id, $type = 'simple', $parent_id = 0, $manages = true ) {
			$this->id        = $id;
			$this->type      = $type;
			$this->parent_id = $parent_id;
			$this->manages   = $manages;
		}
		public function get_id() {
			return $this->id;
		}
		public function is_type( $type ) {
			return $this->type === $type;
		}
		public function get_parent_id() {
			return $this->parent_id;
		}
		public function managing_stock() {
			return $this->manages;
		}
		public function get_stock_managed_by_id() {
			return $this->id;
		}
	}
	class WC_Order_Item_Product {
		private $product;
		private $quantity;
		public function __construct( $product, $quantity ) {
			$this->product  = $product;
			$this->quantity = $quantity;
		}
		public function get_product() {
			return $this->product;
		}
		public function get_quantity() {
			return $this->quantity;
		}
		public function get_product_id() {
			return $this->product->is_type( 'variation' ) ? $this->product->get_parent_id() : $this->product->get_id();
		}
		public function get_variation_id() {
			return $this->product->is_type( 'variation' ) ? $this->product->get_id() : 0;
		}
	}
	class WC_Order {
		public $id;
		public $status;
		public $created_via;
		public $meta = array();
		public $items = array();
		public $customer_id = 0;
		public $deleted = false;
		public $saved = 0;
		public function __construct( $id, $status = 'pending', $created_via = '' ) {
			$this->id          = $id;
			$this->status      = $status;
			$this->created_via = $created_via;
		}
		public function get_id() {
			return $this->id;
		}
		public function get_status() {
			return $this->status;
		}
		public function has_status( $status ) {
			return in_array( $this->status, (array) $status, true );
		}
		public function update_status( $status, $note = '' ) {
			$this->status = $status;
		}
		public function get_meta( $key ) {
			return $this->meta[ $key ] ?? '';
		}
		public function update_meta_data( $key, $value ) {
			$this->meta[ $key ] = $value;
		}
		public function add_product( $product, $quantity ) {
			$this->items[] = new WC_Order_Item_Product( $product, $quantity );
		}
		public function get_items() {
			return $this->items;
		}
		public function calculate_totals( $taxes = true ) {}
		public function save() {
			$this->saved++;
			$GLOBALS['bisn_test']['orders'][ $this->id ] = $this;
			return $this->id;
		}
		public function delete( $force = false ) {
			$this->deleted = true;
			unset( $GLOBALS['bisn_test']['orders'][ $this->id ] );
		}
		public function get_customer_id() {
			return $this->customer_id;
		}
		public function set_customer_id( $id ) {
			$this->customer_id = $id;
		}
	}
	function wc_create_order( $args ) {
		$order = new WC_Order( $GLOBALS['bisn_test']['next_id']++, $args['status'], $args['created_via'] );
		$order->save();
		return $order;
	}
	function wc_get_order( $id ) {
		return $GLOBALS['bisn_test']['orders'][ $id ] ?? false;
	}
	function wc_get_orders( $args ) {
		$found = array();
		foreach ( $GLOBALS['bisn_test']['orders'] as $order ) {
			// Statuses may be named with or without their "wc-" prefix, as the order data stores take them.
			$statuses = array_map(
				function ( $status ) {
					return 0 === strpos( $status, 'wc-' ) ? substr( $status, 3 ) : $status;
				},
				(array) ( $args['status'] ?? array() )
			);
			if ( isset( $args['status'] ) && ! in_array( $order->status, $statuses, true ) ) {
				continue;
			}
			if ( isset( $args['meta_key'] ) && '' === $order->get_meta( $args['meta_key'] ) ) {
				continue;
			}
			if ( isset( $args['meta_value'] ) && $order->get_meta( $args['meta_key'] ) !== $args['meta_value'] ) {
				continue;
			}
			$found[] = $order;
		}
		return $args['limit'] > 0 ? array_slice( $found, 0, $args['limit'] ) : $found;
	}
	function wc_get_order_statuses() {
		$statuses = array();
		foreach ( array( 'pending', 'processing', 'on-hold', 'completed', 'cancelled', 'refunded', 'failed', 'checkout-draft' ) as $s ) {
			$statuses[ 'wc-' . $s ] = $s;
		}
		return $statuses;
	}
	function wc_get_product( $id ) {
		return $GLOBALS['bisn_test']['products'][ $id ] ?? null;
	}
	class WC_Cart {
		public $lines = array();
		public $log = array();
		public function get_cart() {
			return $this->lines;
		}
		public function add_to_cart( $product_id, $quantity = 1, $variation_id = 0, $variation = array(), $data = array() ) {
			// What the cart's stock check sees: the session's own order is left out of the held stock.
			$this->log[] = array( 'add', WC()->session->get( 'order_awaiting_payment' ) );
			$key                 = md5( $product_id . ':' . $variation_id . ':' . count( $this->lines ) );
			$this->lines[ $key ] = array_merge(
				$data,
				array(
					'product_id'   => $product_id,
					'variation_id' => $variation_id,
					'quantity'     => $quantity,
				)
			);
			return $key;
		}
	}
	class WC_Session_Handler {
		public $data = array();
		public $cookie = false;
		public function has_session() {
			return $this->cookie;
		}
		public function set_customer_session_cookie( $set ) {
			$this->cookie = $set;
		}
		public function get( $key, $default = null ) {
			return $this->data[ $key ] ?? $default;
		}
		public function set( $key, $value ) {
			$this->data[ $key ] = $value;
		}
	}
	class BisnWooCommerce {
		public $cart;
		public $session;
	}
	function WC() {
		static $wc = null;
		if ( null === $wc ) {
			$wc = new BisnWooCommerce();
		}
		return $wc;
	}

	class WC_Webhook {
		public $url;
		public $secret;
		public function __construct( $url, $secret ) {
			$this->url    = $url;
			$this->secret = $secret;
		}
		public function get_delivery_url() {
			return $this->url;
		}
		public function get_secret() {
			return $this->secret;
		}
	}
	class BisnWebhookStore {
		public function get_webhooks_ids() {
			return array_keys( $GLOBALS['bisn_test']['webhooks'] );
		}
	}
	class WC_Data_Store {
		public static function load( $name ) {
			return new BisnWebhookStore();
		}
	}
	function wc_get_webhook( $id ) {
		return $GLOBALS['bisn_test']['webhooks'][ $id ] ?? null;
	}
}
