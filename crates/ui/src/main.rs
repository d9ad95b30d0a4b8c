//! The page's entry: install the panic hook and mount the app, or the widget on the
//! widget's page (`widget.html`). Everything else lives in the library.

fn main() {
    console_error_panic_hook::set_once();
    if kiln_ui::is_widget_page() {
        leptos::mount::mount_to_body(kiln_ui::Widget);
    } else {
        leptos::mount::mount_to_body(kiln_ui::App);
    }
}
