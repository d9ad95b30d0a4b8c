// The shop's own script: it waits for widget.js (loaded async), mounts the widget and
// gives it two tools that run in this page.
const KilnWidget =
  window.KilnWidget ?? (await new Promise((resolve) => addEventListener("kilnwidget:load", () => resolve(window.KilnWidget), { once: true })));
const widget = await KilnWidget.mount({
  title: "Shop assistant",
  greeting: "Hi! Ask me about this mug, or to put it in your cart.",
  theme: { accent: "#2f5d8a", radius: "14px" },
});
widget.registerTool({
  name: "read_product",
  description: "The product on screen: its name and price in EUR.",
  inputSchema: { type: "object", properties: {} },
  annotations: { readOnlyHint: true },
  execute: () => ({
    name: document.getElementById("product-name").textContent,
    price: Number(document.getElementById("product-price").textContent),
  }),
});
widget.registerTool({
  name: "add_to_cart",
  description: "Puts `quantity` of the product on screen in the cart; answers the cart's new count.",
  inputSchema: { type: "object", properties: { quantity: { type: "integer", minimum: 1, maximum: 10 } }, required: ["quantity"] },
  execute: ({ quantity }) => {
    const cart = document.getElementById("cart");
    cart.textContent = String(Number(cart.textContent) + quantity);
    return { in_cart: Number(cart.textContent) };
  },
});
window.shopWidget = widget;
