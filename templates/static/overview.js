// The pages' tables marked data-refresh="<fragment URL>" (the overview's partition rows, the
// group page's members and partitions), refreshed in place every two seconds: no full-page
// flash, no lost scroll position. Served as /static/overview.js (the Content-Security-Policy
// allows no inline script).
setInterval(() => {
  document.querySelectorAll('tbody[data-refresh]').forEach(async (body) => {
    try {
      const response = await fetch(body.dataset.refresh, { cache: 'no-store' });
      if (response.ok) {
        body.innerHTML = await response.text();
      } else if (response.status === 401) {
        // The session ended: the reload goes through the sign-in form.
        location.reload();
      }
    } catch (_) { /* the next tick tries again */ }
  });
}, 2000);
